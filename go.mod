module github.com/loamhq/loam

go 1.26
