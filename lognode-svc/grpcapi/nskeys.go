package grpcapi

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/loamhq/loam/shared/envelope"
	"github.com/loamhq/loam/shared/streamapi"
)

// keyAnswer maps a namespace key that cannot be used (envelope.ErrKeyUnavailable):
// FAILED_PRECONDITION with reason key_unavailable, its message naming the namespace; not
// retriable until the key is enabled again in KMS.
func keyAnswer(err error) (answer, bool) {
	if !errors.Is(err, envelope.ErrKeyUnavailable) {
		return answer{}, false
	}
	return answer{code: codes.FailedPrecondition, reason: streamapi.CodeKeyUnavailable}, true
}
