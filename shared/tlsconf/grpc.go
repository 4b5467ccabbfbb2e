package tlsconf

import "google.golang.org/grpc/credentials"

// ServerCredentials are gRPC server transport credentials of ServerConfig.
func (s *Source) ServerCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(s.ServerConfig())
}

// ClientCredentials are gRPC client transport credentials of ClientConfig.
func (s *Source) ClientCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(s.ClientConfig())
}
