"""Attribution: which module and aten op launched each GPU op, what each module costs, and two
runs compared module by module (issue 20).

* :mod:`.gpu_ops`: the module, op and rule of every GPU op of a trace (:func:`.gpu_ops.attribute`).
* :mod:`.modules`: the tables of a trace by module and op (busy time split exactly, launches, idle).
* :mod:`.module_diff`: the arithmetic of two runs' attribution tables, module by module.
* :mod:`.run_diff`: ``tracekit diff`` of two runs or of every pair of modes, and each run against
  its baseline for the reports of ``tracekit analyze``.
* :mod:`.opnames`: op names as attribution shows them, without pandas (the runner records with it).

Importing this package imports none of them: :mod:`.opnames` stays free of pandas.
"""
