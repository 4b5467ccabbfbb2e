1.0
A234-1234-1234https://example.com/repo"com.example.push*
subjectmain*
time:°®µØ€Êµî*%
datacontenttypeapplication/json*
count**

flag*
notea "quoted" Ã©*
partitionkeyuser-7:{"n": [1, 2.50, "x"]}