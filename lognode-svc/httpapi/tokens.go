package httpapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loamhq/loam/lognode-svc/reader"
	"github.com/loamhq/loam/shared/meta"
	"github.com/loamhq/loam/shared/streamapi"
)

// MinTokenWait bounds how long a fetch that presents a consistency token waits for this
// node's watch to reach it when the fetch's own max wait is shorter (max_wait_ms=0 too).
const MinTokenWait = time.Second

// ParseToken parses a consistency token, "v1.<applied index>" as produce answers it
// (FormatToken). Anything else is an error naming what is wrong.
func ParseToken(s string) (uint64, error) {
	rest, ok := strings.CutPrefix(s, "v1.")
	if !ok {
		return 0, fmt.Errorf("consistency token %q: want v1.<applied index>", s)
	}
	if rest == "" || len(rest) > 20 || rest[0] == '+' || rest[0] == '-' || (len(rest) > 1 && rest[0] == '0') {
		return 0, fmt.Errorf("consistency token %q: the applied index is not a decimal number", s)
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("consistency token %q: the applied index is not a decimal number", s)
	}
	return n, nil
}

// AwaitToken makes a fetch of (streamID, partition) read at least what the commit at
// applied index token wrote: it waits up to max(wait, MinTokenWait) for the reader to
// apply the watch events up to token; if they do not arrive in time (this node's watch
// lags or has not seen that commit yet), it drops the partition's cached state, so the
// fetch reads the partition from the sequencer, which acknowledged that commit. A
// quorum stream's token is a commit index of the partition's journal instead: it waits
// for this node's member of that journal (or the member it reads from) to apply it. It
// returns the wait that remains for the fetch's long-poll. token 0 waits for nothing.
func AwaitToken(ctx context.Context, rd *reader.Reader, st meta.Stream, partition int32, token uint64, wait time.Duration) time.Duration {
	streamID := st.ID
	if token > 0 && st.Class == meta.ClassQuorum {
		start := time.Now()
		if rd.AwaitJournal(ctx, streamID, partition, token, max(wait, MinTokenWait)) {
			return max(0, wait-time.Since(start))
		}
	}
	if token == 0 || rd.Applied() >= token {
		return wait
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, max(wait, MinTokenWait))
	ok := rd.WaitApplied(wctx, token)
	cancel()
	if !ok {
		rd.Refresh(streamID, partition)
	}
	return max(0, wait-time.Since(start))
}

// tokenParam reads the fetch's ?token= (0 when absent); malformed, a 400 naming it.
func tokenParam(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	t, err := ParseToken(v)
	if err != nil {
		return 0, badInput(400, streamapi.CodeBadRequest, "query parameter token: %v", err)
	}
	return t, nil
}
