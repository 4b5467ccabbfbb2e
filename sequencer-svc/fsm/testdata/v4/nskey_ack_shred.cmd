Даё┬▒4В"
defaultnode-1