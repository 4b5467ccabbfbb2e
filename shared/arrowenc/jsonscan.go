package arrowenc

import (
	"encoding/json"
	"unicode/utf8"
)

// The record checks take a record's value apart at its top level many times a second; the
// scans here do what encoding/json would do on input it has validated (json.Valid first),
// without its reflection: splitObject splits an object into its members' raw values,
// jsonString reads a string without escapes. Anything else goes to encoding/json, so the
// answers, and the errors, are encoding/json's.

// splitObject answers the members of raw, a JSON object that json.Valid accepted, as
// json.Unmarshal into a map[string]json.RawMessage does (a later member of the same name
// replaces an earlier one), the values aliasing raw.
func splitObject(raw []byte) (map[string]json.RawMessage, error) {
	obj := make(map[string]json.RawMessage)
	i := skipSpace(raw, 1) // past '{'
	if raw[i] == '}' {
		return obj, nil
	}
	for {
		end := stringEnd(raw, i)
		key, ok := jsonString(raw[i:end])
		if !ok {
			if err := json.Unmarshal(raw[i:end], &key); err != nil {
				return nil, err
			}
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // past ':'
		vend := valueEnd(raw, i)
		obj[key] = raw[i:vend:vend]
		i = skipSpace(raw, vend)
		if raw[i] == '}' {
			return obj, nil
		}
		i = skipSpace(raw, i+1) // past ','
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index past the string that starts at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd is the index past the valid JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i // a number, true, false or null
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// jsonString reads the JSON string s (quotes included) when it holds no escape and is
// valid UTF-8 (json.Unmarshal would answer the same); false: decode it with encoding/json.
func jsonString(s []byte) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	in := s[1 : len(s)-1]
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}
