"""HTTP: the front end that owns every connection (`front/`, on the sans-I/O pieces of `http/`),
the subscribe transports it routes to (`transports/`), publishing, admission, and aiohttp's
application for the operator routes and users' own (`app.py`, `extension.py`)."""
