"""The plan layer: a pure function from a validated spec and a backend target to everything a backend applies.

``naming`` (every derived name and label), ``targets`` (the addressing
interface a backend implements), ``policy`` (the job policy, computed once),
``planner`` (``Plan``, ``Task``, ``make_plan``) and ``dryrun`` (a plan with
the files a backend renders from it: what ``dry-run`` shows and ``submit``
applies). Imports ``spec`` and ``protocol`` only.
"""
