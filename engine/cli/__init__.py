"""``python -m engine <verb>``: shared argument handling and one module per verb."""
