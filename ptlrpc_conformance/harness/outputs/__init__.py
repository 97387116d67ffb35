"""Outputs: report.json, report.html, the regression gate, certification documents, hex dumps."""
