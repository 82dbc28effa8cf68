"""The texts jobs read: the bundled default corpus (its disjoint evaluation and calibration parts),
and production traffic read into plain rows: datasets (ShareGPT, OpenAI chat, a text column) and
traces (Mooncake, Azure, BurstGPT), streamed, with one-line errors that name the file and line."""
