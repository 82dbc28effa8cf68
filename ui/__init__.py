"""Small shared pieces of the Streamlit UI (no SQL, no torch: they call storage/engine)."""
