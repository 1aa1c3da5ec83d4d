"""Production monitoring (docs/monitor.md): live traffic evaluated per component into a store,
joined to users' feedback, reported per window.

``store.py`` the schema every other module reads and writes (the contract between them);
``config.py`` MONITOR.yaml; ``intake.py`` sources → sampled, mapped traces not yet stored;
``evaluate.py`` reference-free evaluation and the root cause on the taken path;
``passes.py`` one pass: retention, feedback, sampled batches evaluated and stored;
``feedback.py`` users' feedback (file and HTTP endpoint); ``report.py`` ``monitor report``;
``command.py`` the CLI.
"""
