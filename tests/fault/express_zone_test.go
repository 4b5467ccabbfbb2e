package fault

import (
	"context"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loamhq/loam/shared/objstore"
	"github.com/loamhq/loam/tests/cluster"
	"github.com/loamhq/loam/tests/testserver"
)

// TestExpressZoneLoss: three voters and three log nodes in zones a, b and c, an express
// stream whose zonal buckets are three versitygw servers, one per zone. Every process of
// the leader's zone and that zone's bucket server are SIGKILLed at once under load and
// kept down for faultWindow, then brought back. Produce must resume within seconds through
// the surviving zones (two buckets of three still acknowledge), and the checker stay
// clean (nothing acknowledged lost).
func TestExpressZoneLoss(t *testing.T) {
	zones := []string{"a", "b", "c"}
	var servers []*testserver.VersityGW
	var urls []string
	for range zones {
		s := testserver.StartVersityGWKillable(t)
		servers = append(servers, s)
		q := url.Values{"endpoint": {s.URL}, "path_style": {"true"}, "create_bucket": {"true"}, "region": {s.Region}}
		urls = append(urls, "s3://express?"+q.Encode())
	}
	opts := cluster.Options{DevArgs: []string{"--zones", strings.Join(zones, ",")},
		LognodeArgs: []string{"--express-buckets", strings.Join(urls, ","), "--express-zones", strings.Join(zones, ",")},
		Env:         []string{"AWS_ACCESS_KEY_ID=" + testserver.VersityAccessKey, "AWS_SECRET_ACCESS_KEY=" + testserver.VersitySecretKey, "AWS_REGION=us-east-1"}}
	e := startExpress(t, 3, 3, "xzone", 6, opts)
	l := cluster.NewLedger()
	load := e.load(l)
	time.Sleep(2 * time.Second)
	leader := e.c.WaitLeader(10 * time.Second)
	cf := e.c.File()
	var ids []string
	for _, s := range cf.Sequencers {
		if s.Zone == leader.Zone {
			ids = append(ids, s.ID)
		}
	}
	for _, n := range cf.Nodes {
		if n.Zone == leader.Zone {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("zone %q holds %v, want one voter and one node", leader.Zone, ids)
	}
	zi := strings.Index(strings.Join(zones, ""), leader.Zone)
	pids := map[string]int{}
	for _, id := range ids {
		e.c.Hold(id)
	}
	for _, id := range ids {
		pids[id] = e.c.Signal(id, syscall.SIGKILL)
	}
	servers[zi].Kill()
	killed := time.Now()
	rec := recovery(t, l, killed, 30*time.Second)
	time.Sleep(faultWindow())
	if err := servers[zi].Start(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		e.c.Release(id)
	}
	back := time.Now()
	for _, id := range ids {
		e.c.WaitRestarted(id, pids[id], 30*time.Second)
	}
	time.Sleep(2 * time.Second)
	during := countOutcomes(l, killed, back)
	rep := e.finish(load, l)
	t.Logf("FIGURE express_zone_loss zone=%s (%v, the leader's, and its bucket server): during: %s; produce resumed %s after the kill; lost: none (%d acknowledged attempts all present)",
		leader.Zone, ids, during, rec.Round(time.Millisecond), rep.Acked)
	if during.Acked*2 < during.total() {
		t.Fatalf("%s acknowledged while the zone was down, want at least half", during)
	}
	// The express WAL objects are on the zonal servers (a surviving zone's holds some).
	other := servers[(zi+1)%3]
	b, err := objstore.NewS3(context.Background(), objstore.S3Config{Bucket: "express", Endpoint: other.URL, Region: other.Region,
		AccessKey: other.AccessKey, SecretKey: other.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	n := 0
	if err := b.List(context.Background(), objstore.ExpressPrefix, func(objstore.ObjectInfo) error { n++; return nil }); err != nil || n == 0 {
		t.Fatalf("zone %s's bucket holds %d express WAL objects (%v), want some", zones[(zi+1)%3], n, err)
	}
	t.Logf("zone %s's bucket holds %d express WAL objects", zones[(zi+1)%3], n)
}

// startExpress is start with a stream of class express.
func startExpress(t *testing.T, seqs, nodes int, stream string, parts int32, opts cluster.Options) *env {
	t.Helper()
	return startClass(t, seqs, nodes, stream, parts, "express", opts)
}
