"""Search: recipe studies (Optuna) and the highest load a server sustains under an SLO (SLA finder)."""
