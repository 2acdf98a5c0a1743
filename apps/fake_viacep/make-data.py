#!/usr/bin/python3
"""Builds the fake ViaCEP upstream's data: one ViaCEP-shaped JSON object a line.

Real records come from data/cep/opencep-sample.jsonl beside this script (OpenCEP, MIT),
which has only cep, logradouro, complemento, bairro, localidade, uf, ibge; the
fields ViaCEP adds are filled from data/ibge/ (kelvins/municipios-
brasileiros, MIT): estado and regiao from estados.csv, ddd and siafi from
municipios.csv by IBGE code; unidade and gia are left empty (not in the data).

--derived N adds N synthetic CEPs for benchmarks, made deterministically: the
k-th derived CEP takes municipality k (cycling through municipios.csv in file
order), keeps the first five digits of a real sample CEP of the same UF (so it
falls in that state's range; UFs without a sample CEP use the first sample's),
and numbers the last three digits, skipping any CEP already present. Street
fields of derived CEPs are empty, as for small towns with a single CEP.

  make-data.py [--data DIR] [--derived N] > viacep.jsonl
"""
import argparse
import csv
import json
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(here, "data"),
                    help="folder with ibge/ and cep/ (default: data/ beside this script)")
    ap.add_argument("--derived", type=int, default=0, help="synthetic CEPs to add (default 0)")
    args = ap.parse_args()

    with open(os.path.join(args.data, "ibge", "estados.csv"), encoding="utf-8-sig") as f:
        states = {row["codigo_uf"]: row for row in csv.DictReader(f)}
    with open(os.path.join(args.data, "ibge", "municipios.csv"), encoding="utf-8") as f:
        towns = list(csv.DictReader(f))
    by_ibge = {t["codigo_ibge"]: t for t in towns}
    uf_of_code = {code: s["uf"] for code, s in states.items()}
    state_of_uf = {s["uf"]: s for s in states.values()}

    def record(cep8, logradouro, complemento, bairro, town):
        state = states[town["codigo_uf"]]
        return {
            "cep": cep8[:5] + "-" + cep8[5:],
            "logradouro": logradouro,
            "complemento": complemento,
            "unidade": "",
            "bairro": bairro,
            "localidade": town["nome"],
            "uf": state["uf"],
            "estado": state["nome"],
            "regiao": state["regiao"],
            "ibge": town["codigo_ibge"],
            "gia": "",
            "ddd": town["ddd"],
            "siafi": town["siafi_id"],
        }

    out = {}
    prefix_of_uf = {}
    with open(os.path.join(args.data, "cep", "opencep-sample.jsonl"), encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            cep8 = r.get("cep", "").replace("-", "")
            town = by_ibge.get(r.get("ibge", ""))
            if len(cep8) != 8 or not cep8.isdigit() or town is None:
                print("make-data: skipping %r" % r.get("cep"), file=sys.stderr)
                continue
            out[cep8] = record(cep8, r.get("logradouro", ""), r.get("complemento", ""),
                               r.get("bairro", ""), town)
            prefix_of_uf.setdefault(uf_of_code[town["codigo_uf"]], cep8[:5])

    fallback = next(iter(prefix_of_uf.values()))
    used = {}
    k = 0
    added = 0
    while added < args.derived:
        town = towns[k % len(towns)]
        k += 1
        prefix = prefix_of_uf.get(uf_of_code[town["codigo_uf"]], fallback)
        n = used.get(prefix, 0)
        while n < 1000 and prefix + "%03d" % n in out:
            n += 1
        if n >= 1000:
            if k > len(towns) * 1000:
                sys.exit("make-data: cannot derive that many CEPs")
            continue
        used[prefix] = n + 1
        cep8 = prefix + "%03d" % n
        out[cep8] = record(cep8, "", "", "", town)
        added += 1

    for cep8 in sorted(out):
        print(json.dumps(out[cep8], ensure_ascii=False, separators=(",", ":")))


if __name__ == "__main__":
    main()
