module emb-sigv4-proxy

go 1.26.7

require github.com/aws/aws-sdk-go-v2 v1.48.0

require github.com/aws/smithy-go v1.28.9 // indirect
