/*
 * coring-embed-forward: the bare forward-pass time of an embedding model,
 * no HTTP, no queue: the floor that POST /embed's latency can approach.
 *
 *   coring-embed-forward MODEL_DIR POOL [--batch N[,N...]] [--seconds S]
 *                        [--int8 | --int8-accuracy]
 *
 * POOL: one sentence per line, either plain text or perf's pool format
 * ({"text": "..."} per line; the string is taken as is, JSON escapes are
 * not decoded, which the pool does not use). Sentences are tokenized once;
 * then, per batch size, batches of consecutive sentences (rotating over the
 * pool) go through embed_bert_encode on this thread for S seconds
 * (default 3). Printed per batch size: sentences/s, ms per forward pass
 * (wall time), CPU ms per pass (this thread's CPU time, which other work
 * on the core does not inflate), mean tokens per sentence and GFLOP/s
 * (GOP/s with --int8: linear layers and attention, as 2 * multiply-adds,
 * per CPU second: the figure to set beside coring-peak-compute's).
 * Run it under taskset to pin it to a core.
 *
 * --int8-accuracy: instead of timing, embed every sentence of the pool with
 * the float32 model and with its int8 version (embed_bert_quantize_int8),
 * both L2-normalised as /embed returns them, and print the largest
 * absolute difference of any value and the lowest and mean cosine
 * similarity between the two vectors of a sentence.
 */
#include "coring/embed/embed.h"

#include "coring/embed/qgemm.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: what a pass costs the core, whatever else ran
 * on it meanwhile. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Embed the @n sentences with @m (float32) and with an int8 copy of the
 * model in @dir; print how far apart the normalised vectors are. */
static int int8_accuracy(const char *dir, embed_model *m, size_t n, const int32_t *const *ids,
                         const size_t *lens)
{
    char err[256];
    embed_model *q;
    if (embed_model_open(dir, &q, err, sizeof(err)) < 0) {
        fprintf(stderr, "coring-embed-forward: %s\n", err);
        return 1;
    }
    if (embed_bert_quantize_int8(q->bert) < 0) {
        fprintf(stderr, "coring-embed-forward: cannot quantise the model: out of memory\n");
        embed_model_close(q);
        return 1;
    }
    size_t h = m->config.hidden_size;
    float *a = malloc(h * sizeof(float)), *b = malloc(h * sizeof(float));
    embed_bert_workspace *ws = embed_bert_workspace_create();
    if (!a || !b || !ws)
        return 1;
    double worst = 0, min_cos = 1, sum_cos = 0;
    for (size_t i = 0; i < n; i++) {
        if (embed_bert_encode(m->bert, ws, 1, &ids[i], &lens[i], &a) < 0 ||
            embed_bert_encode(q->bert, ws, 1, &ids[i], &lens[i], &b) < 0)
            return 1;
        embed_l2_normalize(a, h);
        embed_l2_normalize(b, h);
        double dot = 0;
        for (size_t j = 0; j < h; j++) {
            double d = fabs((double)a[j] - b[j]);
            worst = d > worst ? d : worst;
            dot += (double)a[j] * b[j];
        }
        min_cos = dot < min_cos ? dot : min_cos;
        sum_cos += dot;
    }
    printf("model %s: int8 (%s) against float32 over %zu sentences\n", m->name,
           embed_qgemm_kernel(), n);
    printf("max abs diff %.3g, cosine similarity min %.6f mean %.6f\n", worst, min_cos,
           sum_cos / (double)n);
    embed_bert_workspace_free(ws);
    free(a);
    free(b);
    embed_model_close(q);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: coring-embed-forward MODEL_DIR POOL [--batch N[,N...]] [--seconds S]"
               " [--int8 | --int8-accuracy]\n");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    const char *batches = "1,8,32";
    double seconds = 3;
    bool int8 = false, accuracy = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batches = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--int8"))
            int8 = true;
        else if (!strcmp(argv[i], "--int8-accuracy"))
            accuracy = true;
        else {
            usage(stderr);
            return 2;
        }
    }
    if (int8 && accuracy) {
        usage(stderr);
        return 2;
    }
    /* --batch: a comma-separated list of sizes from 1 to 4096. */
    size_t batch_sizes[32], num_batches = 0;
    for (const char *b = batches;;) {
        char *end;
        unsigned long v = strtoul(b, &end, 10);
        if (end == b || v < 1 || v > 4096 || num_batches == 32 || (*end && *end != ',')) {
            fprintf(stderr, "coring-embed-forward: --batch: expected sizes 1-4096 like 1,8,32\n");
            return 2;
        }
        batch_sizes[num_batches++] = v;
        if (!*end)
            break;
        b = end + 1;
    }
    char err[256];
    embed_model *m;
    if (embed_model_open(argv[1], &m, err, sizeof(err)) < 0) {
        fprintf(stderr, "coring-embed-forward: %s\n", err);
        return 1;
    }
    if (int8 && embed_bert_quantize_int8(m->bert) < 0) {
        fprintf(stderr, "coring-embed-forward: out of memory\n");
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    size_t cap = 0, n = 0;
    int32_t **ids = NULL;
    size_t *lens = NULL;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) > 0) {
        char *text = line;
        size_t len = (size_t)got;
        while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
            len--;
        char *q = strstr(text, "\"text\"");
        if (q && (q = strchr(q + 6, '"'))) {
            char *end = strrchr(q + 1, '"');
            if (end) {
                text = q + 1;
                len = (size_t)(end - text);
            }
        }
        if (!len)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            ids = realloc(ids, cap * sizeof(*ids));
            lens = realloc(lens, cap * sizeof(*lens));
            if (!ids || !lens)
                return 1;
        }
        ids[n] = malloc(m->max_tokens * sizeof(int32_t));
        if (!ids[n])
            return 1;
        long got_ids = embed_tokenize(m->tokenizer, text, len, ids[n], m->max_tokens);
        if (got_ids < 2) {
            fprintf(stderr, "coring-embed-forward: cannot tokenize line %zu\n", n + 1);
            return 1;
        }
        lens[n++] = (size_t)got_ids;
    }
    free(line);
    fclose(f);
    if (!n) {
        fprintf(stderr, "coring-embed-forward: %s has no sentences\n", argv[2]);
        return 1;
    }
    openblas_set_num_threads(1);
    const embed_bert_config *c = &m->config;
    size_t h = c->hidden_size;
    if (accuracy)
        return int8_accuracy(argv[1], m, n, (const int32_t *const *)ids, lens);
    double linear_macs = (double)c->num_layers * (4.0 * h * h + 2.0 * h * c->intermediate_size);
    embed_bert_workspace *ws = embed_bert_workspace_create();
    printf("model %s (%s%s), %zu sentences\n", m->name, int8 ? "int8, " : "", int8 ? embed_qgemm_kernel() : "float32", n);
    printf("%6s %12s %12s %12s %12s %10s\n", "batch", "sentences/s", "ms/pass", "cpu ms/pass",
           "tokens/sent", int8 ? "GOP/s" : "GFLOP/s");
    for (size_t bi = 0; bi < num_batches; bi++) {
        size_t batch = batch_sizes[bi];
        const int32_t **bids = malloc(batch * sizeof(*bids));
        size_t *blens = malloc(batch * sizeof(*blens));
        float **outs = malloc(batch * sizeof(*outs));
        float *store = malloc(batch * h * sizeof(float));
        if (!bids || !blens || !outs || !store)
            return 1;
        size_t next = 0, passes = 0, sentences = 0;
        double flops = 0, tokens = 0;
        double start = now_s(), end = start, cpu_start = cpu_s();
        while (end - start < seconds || passes < 3) {
            for (size_t i = 0; i < batch; i++, next = (next + 1) % n) {
                bids[i] = ids[next];
                blens[i] = lens[next];
                outs[i] = store + i * h;
                double l = (double)lens[next];
                tokens += l;
                flops += 2 * (l * linear_macs + (double)c->num_layers * 2 * l * l * h);
            }
            if (embed_bert_encode(m->bert, ws, batch, bids, blens, outs) < 0) {
                fprintf(stderr, "coring-embed-forward: encode failed\n");
                return 1;
            }
            passes++;
            sentences += batch;
            end = now_s();
        }
        double t = end - start, cpu = cpu_s() - cpu_start;
        printf("%6zu %12.1f %12.3f %12.3f %12.1f %10.1f\n", batch, (double)sentences / t,
               t * 1e3 / (double)passes, cpu * 1e3 / (double)passes, tokens / (double)sentences,
               flops / cpu * 1e-9);
        free(bids);
        free(blens);
        free(outs);
        free(store);
    }
    embed_bert_workspace_free(ws);
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    free(lens);
    embed_model_close(m);
    return 0;
}
