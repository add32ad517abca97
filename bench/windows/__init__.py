"""The window benchmark's parts (`bench/bench_windows.py` runs them; docs/benchmarks.md,
"Windows: recall and bill", reads the results).

- `conversations`: what is replayed (turns, sittings, questions with their evidence seqs);
- `generator` and `vocabulary`: the deterministic conversations;
- `policies`: turnkeeper strategies through the public API, and the two references;
- `anchors`: LangChain's, openai-agents' and LlamaIndex's policies with their real packages;
- `billing`: the OpenAI and Anthropic prompt-cache rules, and a window's rendered requests;
- `replay`: one conversation through one policy at one budget, scored and billed;
- `report`: the tables and the picture.
"""
