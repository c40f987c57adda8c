#!/bin/bash
echo built > /app/build.txt
