"""Moving sessions between machines: `agentrt export` and `agentrt import`.

A session is carried as its logical content (`image.SessionImage`: its record streams line by
line, its documents, its sandbox rooms, the blobs it references, its fencing token and its index
attributes), written as one JSON Lines file (`fileformat`). `exporter` reads a session folder of
the files store into an image; `importer` checks a file whole, then places each image into a
base_dir atomically and registers it (index of sessions, SQL session row).
"""
