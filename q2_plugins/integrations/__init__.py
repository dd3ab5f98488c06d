"""Front ends for the frameworks dialogue researchers evaluate in: Hugging Face ``evaluate`` (:mod:`.evaluate`),
lm-eval (:mod:`.lm_eval`), LightEval (:mod:`.lighteval`, tasks in :mod:`.lighteval_tasks`), Inspect
(:mod:`.inspect`), reranking of generated candidates (:mod:`.rerank`), and for chat and RAG applications DeepEval
(:mod:`.deepeval`), Ragas (:mod:`.ragas`) and DSPy (:mod:`.dspy`); what they share: the adapters (:mod:`.adapters`),
the batching of concurrent calls (:mod:`.batching`), chat answers and conversations (:mod:`.chat`), and the start-up
hook's patches (:mod:`.hooks`). The only room that imports ``evaluate``, ``lm_eval``, ``parlai``, ``lighteval``,
``inspect_ai``, ``deepeval``, ``ragas`` or ``dspy``; each front end turns its framework's objects into one call of
the core."""
