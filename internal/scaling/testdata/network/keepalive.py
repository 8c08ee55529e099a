import http.client,sys,time
c=http.client.HTTPConnection(sys.argv[1],8080)
for i in range(int(sys.argv[2])):
    c.request("GET","/"); r=c.getresponse(); b=r.read()
    time.sleep(float(sys.argv[3]))
print(len(b), r.status)
