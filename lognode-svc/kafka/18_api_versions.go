package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: versions 0-4.
//
// Behaviour: answers exactly the keys and versions this gateway serves (the handler
// table, plus the group handler's keys and FindCoordinator when one is configured). A
// request of a version past 4 is answered at v0 with UNSUPPORTED_VERSION and the list, as
// brokers do, so the client retries at a version both know.
//
// Ignored: ClientSoftwareName and ClientSoftwareVersion (v3+). No features are listed.
const (
	apiVersionsMin = 0
	apiVersionsMax = 4
)

func (c *conn) apiVersions(_ context.Context, r request) (kmsg.Response, error) {
	return c.apiVersionsResponse(r.kreq.GetVersion()), nil
}

func (c *conn) apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	keys := make([]int16, 0, len(c.s.versions))
	for k := range c.s.versions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := c.s.versions[k]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, v[0], v[1]
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}
