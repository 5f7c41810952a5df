module emb-path-oracle

go 1.26.0
