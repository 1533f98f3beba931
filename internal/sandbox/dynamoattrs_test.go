package sandbox

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestAnUpdatesAttributesAreItsKeyAndEveryTopLevelNameItSetsRemovesOrReads(t *testing.T) {
	in := map[string]json.RawMessage{}
	raw := `{
		"UpdateExpression": "SET #v = #v + :one, #s.#ok = :sig, heartbeats = if_not_exists(heartbeats, :zero) + :one, tags[2] = :x REMOVE #r ADD #ids :set",
		"ConditionExpression": "attribute_exists(#pk) AND #st <> :t AND (size(#a) > :n OR begins_with(#w, :p)) AND #th BETWEEN :lo AND :hi AND #st IN (:c, :d)",
		"ExpressionAttributeNames": {"#v":"version","#s":"signals","#ok":"UD_OK","#r":"registration","#ids":"instanceIds","#pk":"pk","#st":"state","#a":"assignment","#w":"runId","#th":"threshold"}
	}`
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		t.Fatal(err)
	}
	got := updateAttributes(in, []string{"pk"})
	want := []string{"assignment", "heartbeats", "instanceIds", "pk", "registration", "runId", "signals", "state", "tags", "threshold", "version"}
	if !slices.Equal(got, want) {
		t.Fatalf("attributes %v, want %v (UD_OK is a key of signals, not an attribute; functions and keywords are not names)", got, want)
	}
}
