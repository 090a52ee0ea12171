"""eddy.lm from Python: train a tiny language model from a dict config, load the run, and
generate text that is seeded, streamed and the same as `eddy lm generate` prints."""

import math
import os
import pathlib
import shutil
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


def test_generated_text_that_breaks_a_character_comes_back_with_replacements(run):
    # At a high temperature a small model picks byte tokens at random, so the text stops being
    # UTF-8; the returned str has U+FFFD where `tokenizers` would put it (it raised before).
    model = eddy.lm.load(run["output_dir"])
    pieces = []
    text = model.generate("", max_tokens=30, temperature=50.0, seed=0, on_text=pieces.append)
    raw = b"".join(pieces)
    with pytest.raises(UnicodeDecodeError):
        raw.decode()
    assert text == raw.decode(errors="replace") and "\ufffd" in text


def test_bad_runs_and_prompts_name_the_problem(run, tmp_path):
    with pytest.raises(eddy.Error, match="has no config.yaml"):
        eddy.lm.load(str(tmp_path))
    model = eddy.lm.load(run["output_dir"])
    with pytest.raises(eddy.Error, match="more than the model's context of 32 tokens"):
        model.generate("The cat sees the ball. " * 20)
    with pytest.raises(eddy.Error, match="top_p"):
        model.generate("The", top_p=0)


def test_step_times_model_quantize_and_export(run, tmp_path):
    assert len(run["step_seconds"]) == 60 and min(run["step_seconds"]) > 0
    assert run["tokens_per_step"] == 8 * 32
    trained = eddy.lm.load(run["output_dir"])
    prompt = trained.tokenizer.encode("The cat")
    assert trained.model.vocab_size == trained.tokenizer.vocab_size and trained.model.context_length == 32
    greedy_ids = trained.model.generate(prompt, max_new_tokens=6, temperature=0)
    assert trained.tokenizer.decode(greedy_ids) == trained.generate("The cat", max_tokens=6, temperature=0)

    float_perplexity = trained.validation_perplexity(run["output_dir"])
    # The trainer's last validation loss is over the same windows with the same weights.
    assert float_perplexity == pytest.approx(math.exp(run["validation_loss"]), rel=1e-5)
    trained.quantize(8, str(tmp_path / "int8.safetensors"))
    assert trained.validation_perplexity(run["output_dir"]) == pytest.approx(float_perplexity, rel=0.01)
    reloaded = eddy.lm.load(run["output_dir"])
    reloaded.load_quantized(str(tmp_path / "int8.safetensors"))
    assert reloaded.model.generate(prompt, max_new_tokens=6, temperature=0) == \
        trained.model.generate(prompt, max_new_tokens=6, temperature=0)
    with pytest.raises(eddy.Error, match="bits must be 8 or 4, got 5"):
        eddy.lm.load(run["output_dir"]).quantize(5, str(tmp_path / "int5.safetensors"))

    eddy.lm.export(run["output_dir"], str(tmp_path / "hf"))
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "generation_config.json", "model.safetensors",
                                                   "tokenizer.json", "tokenizer_config.json"]
    from_hf = eddy.lm.load(str(tmp_path / "hf"))
    assert from_hf.model.generate(prompt, max_new_tokens=6, temperature=0) == greedy_ids


@pytest.mark.parametrize("arguments, message", [
    (["--temperature", "-1"], "--temperature: must be a finite number >= 0, got -1"),
    (["--top-p", "0"], "--top-p: must be a number in (0, 1], got 0"),
    (["--max-tokens", "-3"], "--max-tokens: must be a finite number >= 0, got -3"),
    # Read as unsigned by strtoull, these wrapped or saturated: -1 gave 2^64 - 1's text.
    (["--seed", "-1"], "--seed: must be a whole number from 0 to 18446744073709551615, got -1"),
    (["--seed", "18446744073709551616"], "--seed: must be a whole number from 0 to 18446744073709551615, got 1844"),
    (["--prompt", "The cat sees the ball. " * 20], "more than the model's context of 32 tokens"),
], ids=["temperature", "top-p", "max-tokens", "negative-seed", "seed-past-64-bits", "long-prompt"])
def test_the_command_refuses_bad_generation_input_before_printing_anything(run, arguments, message):
    printed = subprocess.run([os.environ["EDDY_CLI"], "lm", "generate", run["output_dir"], *arguments],
                             capture_output=True, text=True)
    assert printed.returncode != 0 and printed.stdout == "" and message in printed.stderr


def test_quantize_refuses_a_group_for_int8_and_makes_the_output_folder(run, tmp_path):
    command = [os.environ["EDDY_CLI"], "lm", "quantize", run["output_dir"], "--bits", "8"]
    refused = subprocess.run(command + ["--group", "32"], capture_output=True, text=True)
    assert refused.returncode != 0 and "--group is for --bits 4" in refused.stderr
    output = tmp_path / "new" / "folder" / "int8.safetensors"
    subprocess.run(command + ["--output", str(output)], capture_output=True, text=True, check=True)
    assert output.exists()


def test_quantize_and_export_refuse_to_write_over_the_run(run, tmp_path):
    # --output naming the run's checkpoint replaced it with the quantised file, and the run could
    # no longer be generated from, exported or resumed.
    folder = tmp_path / "run"
    shutil.copytree(run["output_dir"], folder)
    before = (folder / "checkpoint.safetensors").read_bytes()
    for own in ["checkpoint.safetensors", "config.yaml", "tokenizer.json", "history.h5"]:
        refused = subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", "8",
                                  "--output", str(folder / own)], capture_output=True, text=True)
        assert refused.returncode != 0 and f"is the run's own {own}" in refused.stderr
    assert (folder / "checkpoint.safetensors").read_bytes() == before
    refused = subprocess.run([os.environ["EDDY_CLI"], "lm", "export", str(folder), "--format", "hf",
                              "--output", str(folder)], capture_output=True, text=True)
    assert refused.returncode != 0 and "is the run folder itself" in refused.stderr
    # Another file in the run folder is the user's to write, again too.
    for _ in range(2):
        subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", "8",
                        "--output", str(folder / "mine.safetensors")], capture_output=True, text=True, check=True)
    # From Python too: TrainedModel.quantize wrote over the checkpoint, and eddy.lm.export into the run.
    with pytest.raises(eddy.Error, match="quantize: path .* is the run's own checkpoint.safetensors"):
        eddy.lm.load(str(folder)).quantize(8, str(folder / "checkpoint.safetensors"))
    with pytest.raises(eddy.Error, match="export: output .* is the run folder itself"):
        eddy.lm.export(str(folder), str(folder))
    assert (folder / "checkpoint.safetensors").read_bytes() == before
    # Nor over another run's: a model quantised onto it left that run unloadable, an export into
    # its folder replaced its tokenizer.json.
    other = tmp_path / "other"
    shutil.copytree(run["output_dir"], other)
    with pytest.raises(eddy.Error, match=f"quantize: path .* is the run {other}'s own checkpoint.safetensors"):
        eddy.lm.load(str(folder)).quantize(8, str(other / "checkpoint.safetensors"))
    refused = subprocess.run([os.environ["EDDY_CLI"], "lm", "export", str(folder), "--format", "hf",
                              "--output", str(other)], capture_output=True, text=True)
    assert refused.returncode != 0 and "is the folder of a training run" in refused.stderr
    assert (other / "checkpoint.safetensors").read_bytes() == before
    # What no run reads is the user's to write: a relative path from a folder holding a
    # config.yaml was refused as "the run 's own data/...", and an eddy run's model.safetensors.
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.yaml").write_text("mine: 1\n")
    for output in ["data/int8.safetensors", "model.safetensors"]:
        subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", "8", "--output", output],
                       cwd=project, capture_output=True, text=True, check=True)
    # A Hugging Face folder's generation_config.json is read by generate.
    hf = tmp_path / "hf"
    eddy.lm.export(str(folder), str(hf))
    # Exported again, a Hugging Face folder's stop tokens became <|endoftext|>.
    with pytest.raises(eddy.Error, match="is a Hugging Face folder already"):
        eddy.lm.export(str(hf), str(tmp_path / "again"))
    refused = subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", "8",
                              "--output", str(hf / "generation_config.json")], capture_output=True, text=True)
    assert refused.returncode != 0 and "'s own generation_config.json" in refused.stderr
    # And the tokenizer's side files transformers reads; a new file under a run's data/ is the user's.
    refused = subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", "8",
                              "--output", str(hf / "tokenizer_config.json")], capture_output=True, text=True)
    assert refused.returncode != 0 and "'s own tokenizer_config.json" in refused.stderr
    for bits in ["8", "4"]:  # the second time too: a file under data/ that existed was refused
        subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", bits,
                        "--output", str(folder / "data" / "int8.safetensors")], capture_output=True, text=True,
                       check=True)
    refused = subprocess.run([os.environ["EDDY_CLI"], "lm", "quantize", str(folder), "--bits", "8",
                              "--output", str(folder / "data" / "train.tokens")], capture_output=True, text=True)
    assert refused.returncode != 0 and "is the run's own data/train.tokens" in refused.stderr


def test_one_override_string_is_one_override(run, tmp_path):
    # A str was iterated as a list of overrides, one character each.
    config = run["output_dir"] + "/config.yaml"
    # A program's overrides are not called command-line ones.
    with pytest.raises(eddy.Error, match=r"^override 'training.steps=x': training.steps: expected an integer"):
        eddy.lm.train(config, "training.steps=x")
    with pytest.raises(eddy.Error, match=r"^override 'training.steps=null': gives no value"):
        eddy.lm.train(config, {"training.steps": None})


def test_a_run_of_no_steps_reports_no_training_loss(run, tmp_path):
    result = eddy.lm.train(run["output_dir"] + "/config.yaml", {"training.steps": 0, "output.dir": str(tmp_path)})
    assert result["finished"] and math.isnan(result["train_loss"])
    assert "0 steps; no training step taken, validation loss" in result["message"]


def test_training_into_a_run_folder_says_it_starts_anew(run, tmp_path):
    command = [os.environ["EDDY_CLI"], "lm", "train", run["output_dir"] + "/config.yaml", "training.steps=0",
               f"output.dir={tmp_path}"]
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "holds a run" not in first.stdout + first.stderr
    again = subprocess.run(command, capture_output=True, text=True, check=True)
    assert f"{tmp_path} holds a run; this one starts anew and writes over it (--resume continues a run)" \
        in again.stdout + again.stderr
    # --quiet hides the progress, not the warning that a run is about to be written over.
    quiet = subprocess.run(command + ["--quiet"], capture_output=True, text=True, check=True)
    assert f"warning: {tmp_path} holds a run" in quiet.stderr


def test_paths_may_be_path_objects(run):
    folder = pathlib.Path(run["output_dir"])
    assert eddy.lm.load(folder).step == 60
    assert len(eddy.read_hdf5(folder / "history.h5", "train_loss").numpy()) == 60
    assert "train_loss" in eddy.list_hdf5(folder / "history.h5")


def test_a_loaded_run_is_in_evaluation_mode_and_is_quantised_once(run, tmp_path):
    # In training mode a run with dropout gave other logits on every call.
    trained = eddy.lm.load(run["output_dir"])
    assert not trained.model.training
    with pytest.raises(eddy.Error, match="quantize: group is for bits=4"):
        trained.quantize(8, str(tmp_path / "int8.safetensors"), group=32)
    trained.quantize(4, str(tmp_path / "int4.safetensors"))
    # Quantising the dequantised weights again compounded the rounding under another label.
    with pytest.raises(eddy.Error, match="the model is quantised already"):
        trained.quantize(8, str(tmp_path / "int8.safetensors"))


def test_a_resume_after_the_corpus_changed_keeps_the_runs_token_ids(run, tmp_path):
    # The tokenizer was trained again on the changed text, and training went on with ids that now
    # meant other tokens.
    write_corpus(tmp_path)
    config = {
        "data": {"files": str(tmp_path / "corpus.txt"), "separator": "%"},
        "tokenizer": {"vocab_size": 280},
        "model": {"type": "gpt2", "context": 16, "hidden_size": 16, "layers": 1, "heads": 2},
        "training": {"steps": 2, "batch_size": 2, "evaluate_every": 2, "evaluation_batches": 1},
        "output": {"dir": str(tmp_path / "run")},
    }
    assert eddy.lm.train(config, eager=True)["finished"]
    touched = tmp_path / "corpus.txt"
    original = touched.read_text()
    os.utime(touched)  # the same text, newer: the same tokenizer again, so the resume goes on
    config["training"]["steps"] = 3
    assert eddy.lm.train(config, eager=True, resume=True)["finished"]
    stamp = touched.stat().st_mtime_ns
    with open(touched, "a") as out:
        out.write("Zebras and quokkas play the xylophone.\n%\n" * 300)
    config["training"]["steps"] = 4
    with pytest.raises(eddy.Error, match=r"--resume: data.files \(\S*corpus.txt\) changed since this run made "
                                         r"its tokenizer"):
        eddy.lm.train(config, eager=True, resume=True)
    # Another seed splits the documents otherwise: refused by the settings' check, which names it,
    # before the corpus is cut again.
    with open(touched, "w") as out:
        out.write(original)
    os.utime(touched, ns=(stamp, stamp))
    config["training"]["seed"] = 7
    with pytest.raises(eddy.Error, match=r"--resume: training.seed is 0 in the run that wrote \S+ but 7 now"):
        eddy.lm.train(config, eager=True, resume=True)


def test_a_tokenizer_file_counts_by_its_contents(tmp_path):
    # Replaced at the same path, a tokenizer.file was not noticed: a new run reused the earlier
    # tokenizer and its token files, and a --resume after a touched corpus took the new one under
    # the checkpoint's ids.
    write_corpus(tmp_path)
    lines = (tmp_path / "corpus.txt").read_text().splitlines(keepends=True)
    tokenizer_file = tmp_path / "tokenizer.json"
    eddy.BpeTokenizer.train(lines, 280, special_tokens=["<|endoftext|>"]).save(tokenizer_file)
    config = {
        "data": {"files": str(tmp_path / "corpus.txt"), "separator": "%"},
        "tokenizer": {"file": str(tokenizer_file)},
        "model": {"type": "gpt2", "context": 16, "hidden_size": 16, "layers": 1, "heads": 2},
        "training": {"steps": 2, "batch_size": 2, "evaluate_every": 2, "evaluation_batches": 1},
        "output": {"dir": str(tmp_path / "run")},
    }
    assert eddy.lm.train(config, eager=True)["finished"]
    eddy.BpeTokenizer.train(lines, 300, special_tokens=["<|endoftext|>"]).save(tokenizer_file)
    assert eddy.lm.train(config, eager=True)["finished"]
    assert (tmp_path / "run" / "tokenizer.json").read_text() == tokenizer_file.read_text()
    # The run's tokenizer is the 300-token one now; another file under the same name is refused
    # by a --resume, whose checkpoint means the run's ids.
    eddy.BpeTokenizer.train(lines, 290, special_tokens=["<|endoftext|>"]).save(tokenizer_file)
    config["training"]["steps"] = 3
    with pytest.raises(eddy.Error, match=r"--resume: tokenizer.file \(or its contents\).* changed since this run "
                                         r"made its tokenizer, and the tokenizer in \S+ differs from"):
        eddy.lm.train(config, eager=True, resume=True)


def test_a_resume_without_a_checkpoint_leaves_the_folder_as_it_was(tmp_path):
    # It trained a tokenizer and wrote it and the token files there, then said there was no
    # checkpoint.
    write_corpus(tmp_path)
    folder = tmp_path / "empty"
    folder.mkdir()
    config = {
        "data": {"files": str(tmp_path / "corpus.txt"), "separator": "%"},
        "tokenizer": {"vocab_size": 280},
        "model": {"type": "gpt2", "context": 16, "hidden_size": 16, "layers": 1, "heads": 2},
        "training": {"steps": 2, "batch_size": 2},
        "output": {"dir": str(folder)},
    }
    with pytest.raises(eddy.Error, match=f"--resume: no checkpoint at {folder}/checkpoint.safetensors"):
        eddy.lm.train(config, eager=True, resume=True)
    assert list(folder.iterdir()) == []


def test_bfloat16_autocast_trains_llama_and_gpt2_close_to_float32(tmp_path):
    # training.autocast runs the products in bfloat16 (the CPU's own instructions where it has
    # them): the losses follow float32's to about bfloat16's precision without being float32's.
    write_corpus(tmp_path)
    for model in ({"type": "llama", "kv_heads": 2}, {"type": "gpt2", "dropout": 0.1}):
        losses = {}
        for autocast in ("none", "bfloat16"):
            config = {
                "data": {"files": str(tmp_path / "corpus.txt"), "separator": "%"},
                "tokenizer": {"vocab_size": 300},
                "model": {"context": 32, "hidden_size": 32, "layers": 2, "heads": 4, **model},
                "training": {"steps": 20, "batch_size": 8, "learning_rate": 3e-3, "evaluate_every": 20,
                             "evaluation_batches": 2, "autocast": autocast},
                "output": {"dir": str(tmp_path / f"{model['type']}_{autocast}")},
            }
            result = eddy.lm.train(config)
            assert result["finished"], result["message"]
            losses[autocast] = eddy.read_hdf5(result["output_dir"] + "/history.h5", "train_loss").numpy()
        assert losses["bfloat16"][-1] < losses["bfloat16"][0] * 0.8, model
        assert abs(losses["bfloat16"][-1] - losses["none"][-1]) < 0.05 * losses["none"][-1], model
        assert (losses["bfloat16"] != losses["none"]).any(), model


def test_autocast_needs_float32_training(tmp_path):
    write_corpus(tmp_path)
    config = {"data": {"files": str(tmp_path / "corpus.txt"), "separator": "%"}, "tokenizer": {"vocab_size": 300},
              "model": {"context": 32, "hidden_size": 32, "layers": 1, "heads": 4},
              "training": {"dtype": "float64", "autocast": "bfloat16"}}
    with pytest.raises(eddy.Error, match="training.autocast: bfloat16 rounds float32 products; training.dtype is "
                                         "float64"):
        eddy.lm.train(config)
    # Where it cannot run yet it is refused at the key, not in the first step with a message about
    # a tensor the user never sees (MPI refused the bfloat16 partial sums of an mp split).
    config["training"]["dtype"] = "float32"
    config["parallel"] = {"mesh": [2], "names": ["mp"]}
    with pytest.raises(eddy.Error, match="training.autocast: bfloat16 does not run with an mp axis yet"):
        eddy.lm.train(config)
    del config["parallel"]
    config["device"] = "cuda"
    with pytest.raises(eddy.Error, match="training.autocast: bfloat16 does not run on a GPU yet"):
        eddy.lm.train(config)
