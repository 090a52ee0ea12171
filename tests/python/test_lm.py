"""eddy.lm from Python: train a tiny language model from a dict config, load the run, and
generate text that is seeded, streamed and the same as `eddy lm generate` prints."""

import os
import subprocess

import pytest

import eddy


def write_corpus(folder):
    animals, verbs = ["cat", "dog", "bird", "fox"], ["sees", "likes", "chases"]
    with open(folder / "corpus.txt", "w") as out:
        for k in range(200):
            out.write(f"The {animals[k % 4]} {verbs[k % 3]} the ball.\nThen it sleeps.\n%\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm")
    write_corpus(folder)
    config = {
        "data": {"files": str(folder / "corpus.txt"), "separator": "%"},
        "tokenizer": {"vocab_size": 300},
        "model": {"type": "llama", "context": 32, "hidden_size": 32, "layers": 2, "heads": 4, "kv_heads": 2},
        "training": {"steps": 60, "batch_size": 8, "learning_rate": 3e-3, "evaluate_every": 30,
                     "evaluation_batches": 2},
        "output": {"dir": str(folder / "run")},
    }
    result = eddy.lm.train(config, eager=True)
    assert result["finished"], result["message"]
    return result


def test_training_reports_and_writes_the_loss_curves(run):
    assert run["steps"] == 60
    assert run["validation_loss"] < 2.0  # from log(300) = 5.7
    train_loss = eddy.read_hdf5(run["output_dir"] + "/history.h5", "train_loss").numpy()
    assert len(train_loss) == 60 and train_loss[-1] < train_loss[0] / 2
    perplexity = eddy.read_hdf5(run["output_dir"] + "/history.h5", "validation/perplexity").numpy()
    assert len(perplexity) == 2


def test_generation_is_seeded_streamed_and_as_the_command_prints(run):
    model = eddy.lm.load(run["output_dir"])
    assert model.step == 60 and model.context == 32 and model.parameters > 0
    pieces = []
    text = model.generate("The cat", max_tokens=12, seed=3, on_text=pieces.append)
    assert b"".join(pieces).decode() == text
    assert model.generate("The cat", max_tokens=12, seed=3) == text
    greedy = model.generate("The cat", max_tokens=12, temperature=0)
    assert model.generate("The cat", max_tokens=12, top_k=1, seed=9) == greedy
    # The corpus always goes on like this after "The cat".
    assert greedy.startswith(" sees the ball.") or greedy.startswith(" likes the ball.") or \
        greedy.startswith(" chases the ball.")
    printed = subprocess.run([os.environ["EDDY_CLI"], "lm", "generate", run["output_dir"], "--prompt", "The cat",
                              "--max-tokens", "12", "--seed", "3"], capture_output=True, text=True, check=True)
    assert printed.stdout == "The cat" + text + "\n"
    assert model.tokenizer.decode(model.tokenizer.encode("The cat")) == "The cat"


def test_bad_runs_and_prompts_name_the_problem(run, tmp_path):
    with pytest.raises(eddy.Error, match="has no config.yaml"):
        eddy.lm.load(str(tmp_path))
    model = eddy.lm.load(run["output_dir"])
    with pytest.raises(eddy.Error, match="more than the model's context of 32 tokens"):
        model.generate("The cat sees the ball. " * 20)
    with pytest.raises(eddy.Error, match="top_p"):
        model.generate("The", top_p=0)
