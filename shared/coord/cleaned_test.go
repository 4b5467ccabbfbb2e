package coord_test

import (
	"testing"

	"github.com/loamhq/loam/shared/coord"
	"github.com/loamhq/loam/shared/coord/coordtest"
	"github.com/loamhq/loam/tests/testserver"
)

func TestBoltCleanPoints(t *testing.T) {
	coordtest.RunCleanPoints(t, newBolt)
}

func TestDynamoCleanPoints(t *testing.T) {
	url := testserver.StartMoto(t)
	coordtest.RunCleanPoints(t, func(t *testing.T, opts ...coord.Option) coord.Store {
		s, err := coord.NewDynamo(t.Context(), dynamoConfig(url), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
