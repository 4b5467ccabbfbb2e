package lognodecmd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/loamhq/loam/lognode-svc/node"
)

func TestParseJournalVoters(t *testing.T) {
	got, err := parseJournalVoters("a=127.0.0.1:7101, b=10.0.0.2:7101,c=host:7101")
	want := []node.JournalVoter{{ID: "a", Addr: "127.0.0.1:7101"}, {ID: "b", Addr: "10.0.0.2:7101"}, {ID: "c", Addr: "host:7101"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v %v", got, err)
	}
	for in, msg := range map[string]string{
		"":             "required",
		"a":            "want NODE_ID=HOST:PORT",
		"a=nohostport": "missing port",
		"a=h:1,a=h:2":  "named twice",
		"=h:1":         "want NODE_ID=HOST:PORT",
	} {
		if _, err := parseJournalVoters(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", in, err, msg)
		}
	}
	var f journalFlags
	f.voters = "a=h:1"
	if err := f.apply(&node.Config{}); err == nil || !strings.Contains(err.Error(), "without --journal-addr") {
		t.Errorf("voters without addr: %v", err)
	}
}
