"""One turn of the agent: its named steps (prefetch, open, run, finish: :mod:`.steps`), the
rounds (:mod:`.loop`), the context each round sends (:mod:`.context`), the approval gate
(:mod:`.gate`), mid-turn mail (:mod:`.inject`) and the typed outcomes (:mod:`.outcome`)."""
