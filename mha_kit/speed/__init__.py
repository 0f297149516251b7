"""Speed checks, for any assignment: timing any callables side by side and judging what comes
back. It knows no assignment: each assignment's speed check says what it times, against what,
and what it needs (`assignments/mha/speed.py`: fused against looped; `llm_attention`'s decoding).

`config` (the graded config, or a test config the `speed_config` setting names) → `timing`
(runs beside the student's code, in an assignment's job) → `verdict` (in the grader: sanity
bounds, paired ratios, all or nothing, measured again near the threshold); `calibration` finds
where a threshold belongs on the machine at hand. `speed` uses `runner`, never the reverse.
"""
