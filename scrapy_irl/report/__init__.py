"""Crawl report: sample Scrapy stats during a crawl, then plot them (IRLbot Figs. 6-7).

* :class:`scrapy_irl.report.sampler.StatsSampler` (extension) appends one JSON line of
  numeric stats every ``IRL_REPORT_INTERVAL`` seconds to ``stats.jsonl``;
* :func:`scrapy_irl.report.render.build_report` turns that file into PNG plots and an
  ``index.html``;
* ``scrapy irl-report JOBDIR`` (:mod:`scrapy_irl.report.command`) does it from the shell.

See ``docs/report.rst``.
"""
