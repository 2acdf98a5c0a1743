-- Addresses of Brazilian postal codes (CEP), cached by apps/cep from the
-- ViaCEP API (cache-aside). Every field ViaCEP returns is kept, empty when
-- it did not send it, with the time it was fetched.
CREATE TABLE cep_addresses (
    cep char(8) PRIMARY KEY CHECK (cep ~ '^[0-9]{8}$'),
    logradouro text NOT NULL DEFAULT '',
    complemento text NOT NULL DEFAULT '',
    unidade text NOT NULL DEFAULT '',
    bairro text NOT NULL DEFAULT '',
    localidade text NOT NULL DEFAULT '',
    uf text NOT NULL DEFAULT '',
    estado text NOT NULL DEFAULT '',
    regiao text NOT NULL DEFAULT '',
    ibge text NOT NULL DEFAULT '',
    gia text NOT NULL DEFAULT '',
    ddd text NOT NULL DEFAULT '',
    siafi text NOT NULL DEFAULT '',
    fetched_at timestamptz NOT NULL DEFAULT now()
);
