"""Read models behind the pages and the CLI: the runs table and a run's detail, Insights,
experiment results, and the charts that draw them. Nothing here writes or imports streamlit."""
from engine.reports.controls import Headroom, headroom

__all__ = ["Headroom", "headroom"]
