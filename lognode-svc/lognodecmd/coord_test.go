package lognodecmd

import "testing"

func TestCoordFromTable(t *testing.T) {
	if got := coordFromTable(""); got != "" {
		t.Errorf("no table: %q", got)
	}
	if got := coordFromTable("loam-coord"); got != "dynamodb://loam-coord" {
		t.Errorf("table: %q", got)
	}
	t.Setenv("LOAM_COORD_ENDPOINT", "http://127.0.0.1:5000")
	if got := coordFromTable("loam_coord.1"); got != "dynamodb://loam_coord.1?endpoint=http%3A%2F%2F127.0.0.1%3A5000" {
		t.Errorf("table with endpoint: %q", got)
	}
}
