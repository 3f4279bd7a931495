"""HTTP/1.1 as bytes, with no connection and no I/O: request heads found and parsed
(`parser`, httptools), response heads built (`answer`), request bodies decoded (`body`: length,
chunked transfer, content coding) and access log lines (`accesslog`). The front end's
connections (`web.front`) are made of these."""
