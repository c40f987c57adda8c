#!/bin/bash
id -un > /app/report.txt
