"""Reports of finished runs: tables (Markdown, LaTeX), plots (PNG, SVG), a self-contained HTML viewer, exports.

``write_report`` in :mod:`userturn.report.build` writes all of them; the modules can be used alone.
"""
