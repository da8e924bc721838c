"""The house's infrastructure, which no user calls: resumable runs of many jobs (``runner``), folder
locks (``locks``), atomic writes (``files``), lazily imported names (``lazy``), worker processes and
signals (``processes``), progress bars (``progress``) and seeds (``seeding``)."""
