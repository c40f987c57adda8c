#!/bin/bash
python3 -c 'print(6 * 7)' > /srv/answer.txt
