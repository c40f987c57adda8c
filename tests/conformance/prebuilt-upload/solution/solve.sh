#!/bin/bash
wc -l < data/input.txt > line-count.txt
