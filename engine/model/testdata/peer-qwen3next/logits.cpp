// logits: the peer's (llama.cpp's) logits for a prompt and its greedy continuation, for
// compare.sh. Usage: logits MODEL OUT.f32 N_GEN TOKEN... ; writes the prompt's logits at every
// position ([n x vocab] float32 LE) to OUT.f32 and prints the N_GEN greedy tokens.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) best = i;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL OUT.f32 N_GEN TOKEN...\n", argv[0]);
        return 2;
    }
    const int n_gen = atoi(argv[3]);
    std::vector<llama_token> prompt;
    for (int i = 4; i < argc; i++) prompt.push_back(atoi(argv[i]));
    const int n = (int) prompt.size();

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n + n_gen + 8;
    cp.n_batch = cp.n_ubatch = n;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot make a context\n"); return 1; }
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = prompt[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
    FILE *out = fopen(argv[2], "wb");
    if (!out) { perror(argv[2]); return 1; }
    for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), vocab, out);
    fclose(out);

    int tok = argmax(llama_get_logits_ith(ctx, n - 1), vocab);
    for (int s = 0; s < n_gen; s++) {
        printf(s ? ",%d" : "%d", tok);
        llama_batch one = llama_batch_init(1, 0, 1);
        one.token[0] = tok; one.pos[0] = n + s; one.n_seq_id[0] = 1; one.seq_id[0][0] = 0; one.logits[0] = 1;
        one.n_tokens = 1;
        if (llama_decode(ctx, one) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
        tok = argmax(llama_get_logits_ith(ctx, 0), vocab);
        llama_batch_free(one);
    }
    printf("\n");
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
