"""Records the Hugging Face fixtures of tests/lm/test_hf_interop.cpp into tests/data/hf/.

Each fixture is a tiny GPT2LMHeadModel or LlamaForCausalLM that transformers builds from a config,
with every parameter drawn from a seeded normal (so biases and norms are not their 0 and 1
defaults and a misplaced one shows), saved by save_pretrained, next to reference.safetensors: the
tokens it was run on ("tokens", int64 [batch, T]) and the float32 logits transformers computed
("logits", [batch, T, vocab]).

It needs torch and transformers, which only the bench environment has:

    scripts/install-bench-deps.sh
    .venv-bench/bin/python tests/lm/record_hf_fixtures.py

Rerunning rewrites the fixtures; with the same versions the files come out byte for byte the same.
"""

import pathlib
import shutil

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

OUTPUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "hf"
VOCAB = 64
CONTEXT = 16

FIXTURES = {
    # GPT-2 as GPT2Config has it by default: tied head, gelu_new, 4x MLP.
    "gpt2": GPT2Config(vocab_size=VOCAB, n_positions=CONTEXT, n_embd=16, n_layer=2, n_head=4,
                       bos_token_id=0, eos_token_id=0),
    # Its other options eddy supports: an untied head, exact GELU, a narrower MLP.
    "gpt2_untied_gelu": GPT2Config(vocab_size=VOCAB, n_positions=CONTEXT, n_embd=16, n_layer=2, n_head=4,
                                   n_inner=24, activation_function="gelu", tie_word_embeddings=False,
                                   bos_token_id=0, eos_token_id=0),
    # Llama with grouped-query attention: 4 query heads share 2 key/value heads.
    "llama": LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                         bos_token_id=0, eos_token_id=0),
    # Multi-query attention, biases, a tied head and another RoPE base.
    "llama_tied_bias": LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=CONTEXT,
                                   attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
                                   rope_theta=500000.0, bos_token_id=0, eos_token_id=0),
}


def record(name, config, seed):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").float().eval()
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            noise = 0.2 * torch.randn_like(parameter)
            # Norm weights near one keep the activations at a readable scale.
            parameter.copy_(1 + noise if "norm" in parameter_name or ".ln_" in parameter_name else noise)
        tokens = torch.randint(0, VOCAB, (2, CONTEXT - 4), generator=torch.Generator().manual_seed(seed))
        logits = model(tokens).logits.float().contiguous()
    folder = OUTPUT / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    save_file({"tokens": tokens, "logits": logits}, folder / "reference.safetensors",
              metadata={"recorded_with": f"transformers {transformers.__version__}, torch {torch.__version__}"})
    print(f"{folder}: {sum(f.stat().st_size for f in folder.iterdir())} bytes")


def main():
    for seed, (name, config) in enumerate(FIXTURES.items()):
        record(name, config, seed)


if __name__ == "__main__":
    main()
