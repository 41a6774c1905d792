"""The Streamlit dashboard (`streamlit run dashboards/app.py`) and the DuckDB queries behind it."""
