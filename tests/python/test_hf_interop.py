"""eddy's language models in Hugging Face transformers.

A tiny model is trained with `eddy lm train` and written with `eddy lm export --format hf`; then
transformers' AutoModelForCausalLM and AutoTokenizer load that folder, and must give eddy's token
ids and, on them, eddy's logits (eddy's come from tests/tools/lm_tool.cpp). The other direction,
folders that transformers wrote loading in eddy, is tests/lm/test_hf_interop.cpp.

torch and transformers are only in the bench environment (scripts/install-bench-deps.sh), so in
the project's .venv this module is skipped. Run it with

    EDDY_CLI=build/bin/eddy EDDY_LM_TOOL=build/tests/lm_tool \\
        .venv-bench/bin/python -m pytest tests/python/test_hf_interop.py
"""

import json
import subprocess

import numpy as np
import pytest

transformers = pytest.importorskip(
    "transformers", reason="needs torch and transformers: run under .venv-bench (scripts/install-bench-deps.sh)")
torch = pytest.importorskip("torch")
from safetensors.numpy import load_file  # noqa: E402

TEXTS = [
    "The cat sees the ball.",
    "Then the fox sleeps. The dog likes some water.",
    "<|endoftext|>The bird chases a red box<|endoftext|>",
    "Unseen words: zebra, 42 and émigré!",
]

MODELS = {
    "gpt2": "type: gpt2",
    "gpt2_untied_dropout": "type: gpt2, tie_embeddings: false, dropout: 0.1",
    "llama": "type: llama, kv_heads: 2, rope_theta: 5000",
    "llama_tied": "type: llama, kv_heads: 1, tie_embeddings: true",
}


def write_corpus(folder):
    animals, verbs = ["cat", "dog", "bird", "fox"], ["sees", "likes", "chases"]
    things = ["the ball", "a red box", "the old tree", "some water"]
    lines = []
    for k in range(200):
        lines += [f"The {animals[k % 4]} {verbs[k % 3]} {things[(k // 3) % 4]}.",
                  f"Then the {animals[(k + 1) % 4]} sleeps.", "%"]
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module", params=list(MODELS))
def exported(request, tmp_path_factory, eddy_cli):
    """An `eddy lm train` run of a few dozen steps and its Hugging Face folder."""
    root = tmp_path_factory.mktemp(request.param)
    write_corpus(root / "corpus")
    config = root / "lm.yaml"
    config.write_text(
        f"data: {{files: '{root / 'corpus' / '*.txt'}', separator: '%', validation_fraction: 0.1}}\n"
        "tokenizer: {vocab_size: 300}\n"
        f"model: {{{MODELS[request.param]}, context: 48, hidden_size: 32, layers: 2, heads: 4}}\n"
        # Enough steps for logits of a few units, so that a mismatch shows at 1e-5.
        "training: {steps: 40, batch_size: 4, learning_rate: 1.0e-2, evaluate_every: 40, evaluation_batches: 1,\n"
        "           schedule: {type: cosine, warmup: 4}}\n"
        f"output: {{dir: '{root / 'run'}', checkpoint_every: 40}}\n", encoding="utf-8")
    for command in ([str(eddy_cli), "lm", "train", str(config), "--eager", "--quiet"],
                    [str(eddy_cli), "lm", "export", str(root / "run"), "--format", "hf"]):
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
    return root / "run"


def eddy_logits(lm_tool, folder, text, output):
    result = subprocess.run([str(lm_tool), "logits", str(folder), text, str(output)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    tensors = load_file(str(output))
    return tensors["ids"], tensors["logits"]


def test_transformers_loads_the_folder_with_its_config(exported):
    folder = exported / "hf"
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    expected_class = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}[config["model_type"]]
    assert type(model).__name__ == expected_class
    assert model.config.vocab_size == len(tokenizer)
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert tokenizer.bos_token == tokenizer.eos_token == "<|endoftext|>"
    assert model.config.bos_token_id == model.config.eos_token_id == end_of_text
    assert model.generation_config.eos_token_id == end_of_text
    # No parameter left to transformers' random initialisation: every one came from the file.
    eddy_weights = load_file(str(folder / "model.safetensors"))
    state = model.state_dict()
    for name, value in eddy_weights.items():
        np.testing.assert_array_equal(state[name].numpy(), value, err_msg=name)
    tied = config["tie_word_embeddings"]
    embedding = model.get_input_embeddings().weight
    assert (model.get_output_embeddings().weight.data_ptr() == embedding.data_ptr()) == tied


@pytest.mark.parametrize("text", TEXTS)
def test_transformers_gives_eddys_ids_and_logits(exported, lm_tool, tmp_path, text):
    folder = exported / "hf"
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids, logits = eddy_logits(lm_tool, exported, text, tmp_path / "eddy.safetensors")
    assert tokenizer(text)["input_ids"] == ids[0].tolist()
    assert tokenizer.decode(ids[0].tolist()) == text
    with torch.no_grad():
        theirs = model(torch.from_numpy(ids)).logits.numpy()
    difference = float(np.abs(theirs - logits).max())
    print(f"{exported.parent.name} {text!r}: largest logit difference {difference:.2e}, "
          f"largest logit {np.abs(logits).max():.2f}")
    assert difference < 1e-5
    # eddy reads its own export back as transformers does.
    _, from_folder = eddy_logits(lm_tool, folder, text, tmp_path / "hf.safetensors")
    np.testing.assert_array_equal(from_folder, logits)
