package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestSweepEventsAreWhatTheSchedulesSend: functions/events/<function>-sweep.json, the sample
// events `sam local invoke` is documented with, hold exactly the input the module's
// EventBridge Scheduler schedules send.
func TestSweepEventsAreWhatTheSchedulesSend(t *testing.T) {
	c := loadDir(t, modulePath(t))
	e := evaluate(t, c, baseVars(3, ecrSequencer, ecrLognode))
	sched := c.resources["aws_scheduler_schedule.sweep"]
	if sched == nil {
		t.Fatal("no aws_scheduler_schedule.sweep")
	}
	target := mustBlock(t, sched.Body, "target")
	var sent any
	if err := json.Unmarshal([]byte(e.value(t, attr(t, target, "input"), e.ctx).AsString()), &sent); err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"segmenter", "retention", "compaction", "gc"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "functions", "events", fn+"-sweep.json"))
		if err != nil {
			t.Fatal(err)
		}
		var sample any
		if err := json.Unmarshal(b, &sample); err != nil {
			t.Fatalf("%s-sweep.json: %v", fn, err)
		}
		if !reflect.DeepEqual(sample, sent) {
			t.Errorf("%s-sweep.json is %v; the schedules send %v", fn, sample, sent)
		}
	}
}
