// Package kafka holds nothing but the requirement on franz-go v1.22.3, so that franz-go's
// own pkg/kgo integration tests run from this module against a Loam cluster (run.sh; see
// README.md).
package kafka

import _ "github.com/twmb/franz-go/pkg/kgo"
